# An identity provider is imported by its ID. The client secret cannot be read back: the first
# apply after the import sends client_secret_wo (its version changes from none to the configured one).
terraform import renga_identity_provider.corp idp_01jc3x9m1h7r4v5n8q2w6e0t9y
