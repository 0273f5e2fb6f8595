"""Multi-turn evaluation: scenarios (as data), the simulated user and its guards."""
