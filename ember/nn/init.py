"""TODO(nn): ember.nn.init."""
