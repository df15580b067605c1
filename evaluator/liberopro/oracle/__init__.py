"""The oracle: the scripted controller, the policy that drives it, and the nominal-solvability check."""
