"""toolflow-assistant: the game assistant's and the research worker's tools for toolflow's example specs.

Importing this package imports nothing else; the plugin module is
:mod:`toolflow_assistant.plugin`, the tools live in :mod:`toolflow_assistant.tools`
and :mod:`toolflow_assistant.worker`, their shared state in :mod:`toolflow_assistant.world`.
"""

__version__ = "0.1.0"
