"""Jobs on the twin: who holds which card (scheduling; issue 13)."""
