package cli

import "testing"

func TestTransferExportFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdTransferExport, []flagCase[transferExportOptions]{
		{name: "organization", args: []string{"org_1"}, want: transferExportOptions{OrganizationID: "org_1"}},
		{name: "wait and key", args: []string{"org_1", "--wait", "--idempotency-key", "k"},
			want: transferExportOptions{OrganizationID: "org_1", Wait: true, IdempotencyKey: "k"}},
		{name: "no organization", args: nil, wantErr: "missing argument ORGANIZATION_ID"},
	})
}

func TestTransferStatusFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdTransferStatus, []flagCase[transferStatusOptions]{
		{name: "id", args: []string{"xfr_1"}, want: transferStatusOptions{TransferID: "xfr_1"}},
		{name: "two ids", args: []string{"xfr_1", "xfr_2"}, wantErr: `unexpected argument "xfr_2"`},
	})
}

func TestTransferListFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdTransferList, []flagCase[transferListOptions]{
		{name: "all", args: nil, want: transferListOptions{}},
		{name: "one organization", args: []string{"--organization", "org_1", "--page-size", "5"},
			want: transferListOptions{OrganizationID: "org_1", PageSize: 5}},
		{name: "an argument", args: []string{"org_1"}, wantErr: `unexpected argument "org_1"`},
	})
}

func TestTransferCancelFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdTransferCancel, []flagCase[transferCancelOptions]{
		{name: "id", args: []string{"xfr_1"}, want: transferCancelOptions{TransferID: "xfr_1"}},
		{name: "key", args: []string{"xfr_1", "--idempotency-key", "k"}, want: transferCancelOptions{TransferID: "xfr_1", IdempotencyKey: "k"}},
		{name: "no id", args: nil, wantErr: "missing argument TRANSFER_ID"},
	})
}

func TestTransferDownloadFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdTransferDownload, []flagCase[transferDownloadOptions]{
		{name: "file", args: []string{"xfr_1", "--file", "a.tar.gz"}, want: transferDownloadOptions{TransferID: "xfr_1", Output: "a.tar.gz"}},
		{name: "short file", args: []string{"xfr_1", "-f", "a.tar.gz", "--idempotency-key", "k"},
			want: transferDownloadOptions{TransferID: "xfr_1", Output: "a.tar.gz", IdempotencyKey: "k"}},
		{name: "no file", args: []string{"xfr_1"}, wantErr: `required flag(s) "file" not set`},
	})
}

func TestTransferImportFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdTransferImport, []flagCase[transferImportOptions]{
		{name: "organization and file", args: []string{"org_1", "a.tar.gz"}, want: transferImportOptions{OrganizationID: "org_1", File: "a.tar.gz"}},
		{name: "key", args: []string{"org_1", "a.tar.gz", "--idempotency-key", "k"},
			want: transferImportOptions{OrganizationID: "org_1", File: "a.tar.gz", IdempotencyKey: "k"}},
		{name: "no file", args: []string{"org_1"}, wantErr: "missing argument FILE"},
	})
}

func TestTransferCompleteFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdTransferComplete, []flagCase[transferCompleteOptions]{
		{name: "id", args: []string{"xfr_1"}, want: transferCompleteOptions{TransferID: "xfr_1"}},
		{name: "destination", args: []string{"xfr_1", "--destination-url", "https://eu1.example"},
			want: transferCompleteOptions{TransferID: "xfr_1", DestinationURL: "https://eu1.example"}},
		{name: "no id", args: nil, wantErr: "missing argument TRANSFER_ID"},
	})
}
