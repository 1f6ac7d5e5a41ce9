"""Developer tools: checkov wrapper and README generator."""
