"""Domain families: each turns a config into domains and generates their tasks by index."""
