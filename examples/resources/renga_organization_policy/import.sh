# A policy is imported by its organization's ID.
terraform import renga_organization_policy.acme org_01jc3x9m1h7r4v5n8q2w6e0t9y
