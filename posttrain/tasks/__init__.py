"""Task taxonomy, domain registry and the task pool."""
