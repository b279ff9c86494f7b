# An invitation is imported by <organization_id>/<invitation_id>.
terraform import renga_owner_invitation.olivia org_01jc3x9m1h7r4v5n8q2w6e0t9y/inv_01jc3x9m1h7r4v5n8q2w6e0t9y
