"""Elastic launch: the agent that rendezvouses nodes, starts workers, watches and restarts them."""
