resource "renga_organization" "acme" {
  slug         = "acme"
  display_name = "Acme Corporation"
}
