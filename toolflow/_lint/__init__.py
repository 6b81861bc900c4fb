"""``toolflow lint``: rules, configuration, suppressions, the engine and output formats."""
