# An organization is imported by its ID (renga org list shows it).
terraform import renga_organization.acme org_01jc3x9m1h7r4v5n8q2w6e0t9y
