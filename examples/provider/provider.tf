terraform {
  required_providers {
    renga = {
      source = "renga/renga"
    }
  }
}

# The URL and the operator token come from RENGA_URL and RENGA_OPERATOR_TOKEN
# (`renga serve --dev` prints both as export lines). Set them here only from
# variables: a token in the configuration ends up in plan files.
provider "renga" {
  url = "https://renga.example.com"
}
