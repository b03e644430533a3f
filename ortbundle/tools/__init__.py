"""The commands beside build: pin, new-recipe (scaffold), smoke and the CI workflow."""
