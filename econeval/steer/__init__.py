"""STEER-ME re-implementation: econeval's own question generator (templates + solvers)."""
