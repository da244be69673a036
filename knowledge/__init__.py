"""The knowledge base: events the controller records and effect models learned from them."""
