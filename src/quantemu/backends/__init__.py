"""Per-target emulations. Each backend package registers its operators in :mod:`.registry`."""
