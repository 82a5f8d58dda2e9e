"""Optional integrations with other Django apps; each module imports its app only when used."""
