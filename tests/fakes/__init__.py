"""Fakes shared by tests (real implementations of small protocols, not mocks)."""
