# There is one support source per deployment; its import ID is always support_source.
terraform import renga_support_source.this support_source
