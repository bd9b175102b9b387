"""Reading a finished run back: lineage, leak search, audit, findings bank and promote."""
