"""Security and behaviour tests for posttrain.sandbox."""
