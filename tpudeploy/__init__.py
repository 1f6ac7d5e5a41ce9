"""Plain-Python domain logic for the Gemma 4 E2B on TPU v5e deployment (never imports cdktf)."""
