"""Figures (matplotlib, Agg backend): data inspection, GA-vs-RMSprop comparison, GAN validation."""
