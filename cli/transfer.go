package cli

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/server"
)

// newCmdTransfer is `renga transfer`: moving an organization between deployments.
func newCmdTransfer(f *Factory) *cobra.Command {
	cmd := group("transfer", "Move an organization between deployments: export, download, import, complete")
	cmd.AddCommand(newCmdTransferExport(f, nil), newCmdTransferStatus(f, nil), newCmdTransferList(f, nil),
		newCmdTransferCancel(f, nil), newCmdTransferDownload(f, nil), newCmdTransferImport(f, nil),
		newCmdTransferComplete(f, nil))
	return cmd
}

var transferHeaders = []string{"ID", "KIND", "STATE", "ORGANIZATION", "ROWS", "BYTES", "SHA256", "CREATED"}

func (f *Factory) transferRow(t client.Transfer) []string {
	sum := ""
	if t.Sha256 != nil {
		sum = *t.Sha256
	}
	return []string{t.Id, string(t.Kind), string(t.State), t.OrganizationId, strconv.FormatInt(t.Progress.Rows, 10),
		strconv.FormatInt(t.Progress.Bytes, 10), sum, f.timeCell(t.CreatedAt)}
}

func (f *Factory) printTransfer(body []byte, t *client.Transfer) error {
	return f.print(body, transferHeaders, func() [][]string { return [][]string{f.transferRow(*t)} })
}

// progress is a progress bar of total bytes on stderr when stderr is a terminal, else nil.
func (f *Factory) progress(total int64, what string) *progressbar.ProgressBar {
	file, ok := f.Stderr.(*os.File)
	if !ok || !term.IsTerminal(int(file.Fd())) {
		return nil
	}
	return progressbar.NewOptions64(total, progressbar.OptionSetWriter(file), progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond))
}

type transferExportOptions struct {
	f *Factory

	OrganizationID string
	Wait           bool
	ForMove        bool
	IdempotencyKey string
}

func newCmdTransferExport(f *Factory, runF func(*transferExportOptions) error) *cobra.Command {
	opts := &transferExportOptions{f: f}
	cmd := &cobra.Command{
		Use:   "export ORGANIZATION_ID",
		Short: "Start exporting an organization into an archive",
		Args:  positional("ORGANIZATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return transferExportRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "wait until the export succeeded, failed or was cancelled")
	cmd.Flags().BoolVar(&opts.ForMove, "for-move", false,
		"the first step of a move: freeze the organization's agent writes (503 moving) until the move is completed or the export cancelled or failed")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr)")
	return cmd
}

func transferExportRun(ctx context.Context, opts *transferExportOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	key := newIdempotencyKey(opts.IdempotencyKey)
	r, err := c.CreateExportWithResponse(ctx, opts.OrganizationID, &client.CreateExportParams{IdempotencyKey: key},
		client.ExportCreate{ForMove: &opts.ForMove})
	if err := f.checkKeyed(&key, r, err); err != nil {
		return err
	}
	if !opts.Wait {
		return f.printTransfer(r.Body, r.JSON202)
	}
	if f.Local() {
		// A release command works its export itself rather than wait for a server process.
		if err := f.runExportHere(ctx, r.JSON202.Id); err != nil {
			return err
		}
	}
	for {
		g, err := c.GetTransferWithResponse(ctx, r.JSON202.Id)
		if err := check(g, err); err != nil {
			return err
		}
		// An export waits in pending and running; any other state ends the wait, including one
		// a newer server has that this client does not know (shown as it is, not waited on
		// forever).
		switch client.TransferState(g.JSON200.State) {
		case client.TransferStatePending, client.TransferStateRunning:
		default:
			if err := f.printTransfer(g.Body, g.JSON200); err != nil {
				return err
			}
			if client.TransferState(g.JSON200.State) != client.TransferStateSucceeded {
				return fmt.Errorf("export %s %s", g.JSON200.Id, g.JSON200.State)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// runExportHere works an export in this process, as the server's job would.
func (f *Factory) runExportHere(ctx context.Context, id string) error {
	cfg, err := server.LoadConfig(f.Getenv, server.ModeRelease)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("configuration refused:\n%w", err)}
	}
	pool, err := f.Pool(ctx)
	if err != nil {
		return err
	}
	return server.RunExport(ctx, pool, cfg, slog.New(slog.NewTextHandler(f.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), id)
}

type transferStatusOptions struct {
	f *Factory

	TransferID string
}

func newCmdTransferStatus(f *Factory, runF func(*transferStatusOptions) error) *cobra.Command {
	opts := &transferStatusOptions{f: f}
	cmd := &cobra.Command{
		Use:   "status TRANSFER_ID",
		Short: "Show a transfer's state and progress",
		Args:  positional("TRANSFER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.TransferID = args[0]
			if runF != nil {
				return runF(opts)
			}
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := c.GetTransferWithResponse(cmd.Context(), opts.TransferID)
			if err := check(r, err); err != nil {
				return err
			}
			return f.printTransfer(r.Body, r.JSON200)
		},
	}
	return cmd
}

type transferListOptions struct {
	f *Factory

	OrganizationID string
	PageSize       int
	PageToken      string
}

func newCmdTransferList(f *Factory, runF func(*transferListOptions) error) *cobra.Command {
	opts := &transferListOptions{f: f}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List exports and imports, newest first",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return transferListRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.OrganizationID, "organization", "", "only this organization's transfers")
	cmd.Flags().IntVar(&opts.PageSize, "page-size", 0, "items per page (1..500)")
	cmd.Flags().StringVar(&opts.PageToken, "page-token", "", "the next_page_token of the previous page")
	return cmd
}

func transferListRun(ctx context.Context, opts *transferListOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	params := &client.ListTransfersParams{}
	if opts.OrganizationID != "" {
		params.OrganizationId = &opts.OrganizationID
	}
	if opts.PageSize != 0 {
		params.PageSize = &opts.PageSize
	}
	if opts.PageToken != "" {
		params.PageToken = &opts.PageToken
	}
	r, err := c.ListTransfersWithResponse(ctx, params)
	if err := check(r, err); err != nil {
		return err
	}
	return f.print(r.Body, transferHeaders, func() [][]string {
		var rows [][]string
		for _, t := range r.JSON200.Items {
			rows = append(rows, f.transferRow(t))
		}
		return rows
	})
}

type transferCancelOptions struct {
	f *Factory

	TransferID     string
	IdempotencyKey string
}

func newCmdTransferCancel(f *Factory, runF func(*transferCancelOptions) error) *cobra.Command {
	opts := &transferCancelOptions{f: f}
	cmd := &cobra.Command{
		Use:   "cancel TRANSFER_ID",
		Short: "Cancel an export (its archive and download authorizations are void)",
		Args:  positional("TRANSFER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.TransferID = args[0]
			if runF != nil {
				return runF(opts)
			}
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			key := optionalIdempotencyKey(opts.IdempotencyKey)
			r, err := c.CancelTransferWithResponse(cmd.Context(), opts.TransferID,
				&client.CancelTransferParams{IdempotencyKey: key})
			if err := f.checkKeyed(key, r, err); err != nil {
				return err
			}
			return f.printTransfer(r.Body, r.JSON200)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	return cmd
}

type transferDownloadOptions struct {
	f *Factory

	TransferID     string
	Output         string
	IdempotencyKey string
}

func newCmdTransferDownload(f *Factory, runF func(*transferDownloadOptions) error) *cobra.Command {
	opts := &transferDownloadOptions{f: f}
	cmd := &cobra.Command{
		Use:   "download TRANSFER_ID",
		Short: "Authorize and download an export's archive, checking its SHA-256",
		Args:  positional("TRANSFER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.TransferID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return transferDownloadRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Output, "file", "f", "", "write the archive to FILE")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key of the download authorization (default: a new one)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func transferDownloadRun(ctx context.Context, opts *transferDownloadOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	// The authorization shows a single-use capability once; the command spends it at once, so
	// its key is not worth a hint.
	a, err := c.CreateDownloadAuthorizationWithResponse(ctx, opts.TransferID,
		&client.CreateDownloadAuthorizationParams{IdempotencyKey: newIdempotencyKey(opts.IdempotencyKey)})
	if err := check(a, err); err != nil {
		return err
	}
	if a.JSON201 == nil || a.JSON201.DownloadUrl == "" {
		return fmt.Errorf("the authorization carries no download URL (a replay of an earlier one): rerun without --idempotency-key")
	}
	u, err := url.Parse(a.JSON201.DownloadUrl)
	if err != nil {
		return fmt.Errorf("download URL: %w", err)
	}
	sc, err := f.StreamingClient(ctx)
	if err != nil {
		return err
	}
	resp, err := sc.GetTransferArchive(ctx, opts.TransferID, &client.GetTransferArchiveParams{Capability: u.Query().Get("capability")})
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return check(&client.GetTransferArchiveResponse{Body: body, HTTPResponse: resp}, nil)
	}
	out, err := os.Create(opts.Output)
	if err != nil {
		return err
	}
	sum := sha256.New()
	dst := io.MultiWriter(out, sum)
	if bar := f.progress(resp.ContentLength, "downloading"); bar != nil {
		dst = io.MultiWriter(dst, bar)
		defer func() { _ = bar.Finish() }()
	}
	n, err := io.Copy(dst, resp.Body)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	want := resp.Header.Get("Repr-Digest")
	if got := "sha-256=:" + base64.StdEncoding.EncodeToString(sum.Sum(nil)) + ":"; want != got {
		return fmt.Errorf("the archive's SHA-256 does not match the server's (%s): the download is damaged", want)
	}
	fmt.Fprintf(f.Stdout, "%s\t%d bytes\tsha256 %s\n", opts.Output, n, hex.EncodeToString(sum.Sum(nil)))
	return nil
}

type transferImportOptions struct {
	f *Factory

	OrganizationID string
	File           string
	IdempotencyKey string
}

func newCmdTransferImport(f *Factory, runF func(*transferImportOptions) error) *cobra.Command {
	opts := &transferImportOptions{f: f}
	cmd := &cobra.Command{
		Use:   "import ORGANIZATION_ID FILE",
		Short: "Import an archive into an empty organization (create it with renga org create)",
		Args:  positional("ORGANIZATION_ID", "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID, opts.File = args[0], args[1]
			if runF != nil {
				return runF(opts)
			}
			return transferImportRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr)")
	return cmd
}

func transferImportRun(ctx context.Context, opts *transferImportOptions) error {
	f := opts.f
	in, err := os.Open(opts.File)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	c, err := f.StreamingClient(ctx)
	if err != nil {
		return err
	}
	var body io.Reader = in
	if st, err := in.Stat(); err == nil {
		if bar := f.progress(st.Size(), "uploading"); bar != nil {
			r := progressbar.NewReader(in, bar)
			body = &r
			defer func() { _ = bar.Finish() }()
		}
	}
	key := newIdempotencyKey(opts.IdempotencyKey)
	r, err := c.ImportOrganizationWithBodyWithResponse(ctx, opts.OrganizationID,
		&client.ImportOrganizationParams{IdempotencyKey: key}, "application/octet-stream", body)
	if err := f.checkKeyed(&key, r, err); err != nil {
		return err
	}
	return f.printTransfer(r.Body, r.JSON201)
}

type transferCompleteOptions struct {
	f *Factory

	TransferID     string
	DestinationURL string
	IdempotencyKey string
}

func newCmdTransferComplete(f *Factory, runF func(*transferCompleteOptions) error) *cobra.Command {
	opts := &transferCompleteOptions{f: f}
	cmd := &cobra.Command{
		Use:   "complete TRANSFER_ID",
		Short: "Mark the exported organization moved (after the destination imported it)",
		Args:  positional("TRANSFER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.TransferID = args[0]
			if runF != nil {
				return runF(opts)
			}
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			body := client.TransferComplete{}
			if opts.DestinationURL != "" {
				body.DestinationUrl = &opts.DestinationURL
			}
			key := optionalIdempotencyKey(opts.IdempotencyKey)
			r, err := c.CompleteTransferWithResponse(cmd.Context(), opts.TransferID,
				&client.CompleteTransferParams{IdempotencyKey: key}, body)
			if err := f.checkKeyed(key, r, err); err != nil {
				return err
			}
			return f.printTransfer(r.Body, r.JSON200)
		},
	}
	cmd.Flags().StringVar(&opts.DestinationURL, "destination-url", "", "the destination deployment's public URL, recorded on the transfer")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	return cmd
}
