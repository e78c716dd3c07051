"""Loaders that turn official benchmark files into unified Example records."""
