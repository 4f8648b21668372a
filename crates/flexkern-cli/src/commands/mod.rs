//! One module per subcommand family.
