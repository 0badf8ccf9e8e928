"""Model backends. Each heavy library is imported only inside its own module."""
