"""Evaluation instances: building episode plans, generating and checking instance sets, the study."""
