# Many organizations, each with a policy: for measuring apply and refresh times against a
# development deployment. `terraform apply -parallelism=10 -var count_of_organizations=200`.

terraform {
  required_providers {
    renga = {
      source = "renga/renga"
    }
  }
}

provider "renga" {}

variable "count_of_organizations" {
  type    = number
  default = 200
}

variable "prefix" {
  type    = string
  default = "scale"
}

resource "renga_organization" "org" {
  count        = var.count_of_organizations
  slug         = format("%s-%03d", var.prefix, count.index)
  display_name = format("Scale test %03d", count.index)
}

resource "renga_organization_policy" "org" {
  count           = var.count_of_organizations
  organization_id = renga_organization.org[count.index].id

  limits = {
    max_agents = 100 + count.index
    max_users  = 10
  }

  entitlements = {
    jobs = count.index % 2 == 0
  }
}
