"""Shower physics: observables, file inspection, GAN validation and ensemble scoring.

Modules: ``observables`` (vectorised profiles, moments, sampling fraction, shower maximum, hit
counts), ``inspect`` (summary of a shower file), ``validation`` (the GAN-vs-data score, defined
once), ``ensemble`` (SAGIPS ensemble mean and spread over generator checkpoints).
"""
