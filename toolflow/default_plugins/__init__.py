"""toolflow's built-in behaviour, shipped as ordinary plugins and registered like any other."""
