"""Fixtures for graph pass tests."""
