"""Developer tools: the bundle check, the stack check, notebooks run locally."""
