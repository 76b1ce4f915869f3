"""The native engine: plain-Python core (block pool, radix cache, scheduler) plus a tensor runner."""
