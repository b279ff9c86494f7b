resource "renga_organization" "acme" {
  slug         = "acme"
  display_name = "Acme Corporation"
}

# Sends the invitation mail; the secret is only in the mail.
resource "renga_owner_invitation" "olivia" {
  organization_id = renga_organization.acme.id
  email           = "olivia@acme.example"
}
