"""The pure core: entries and config records, the planner, where knob lines go. No files, no git."""
