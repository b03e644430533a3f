"""What a build is: the project, its options, products, recipes, targets, sources, externals and
the schema every input file is checked against."""
