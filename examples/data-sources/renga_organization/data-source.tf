data "renga_organization" "acme" {
  slug = "acme"
}

data "renga_organization" "by_id" {
  id = "org_01jc3x9m1h7r4v5n8q2w6e0t9y"
}

output "acme_state" {
  value = data.renga_organization.acme.state
}
