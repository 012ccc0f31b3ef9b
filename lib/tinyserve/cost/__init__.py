"""What a step costs: hardware presets, the pricing of a step's parts, the wall and modeled clocks (torch-free)."""
