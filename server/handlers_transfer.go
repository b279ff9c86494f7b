package server

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

func transferJSON(t domain.Transfer) api.Transfer {
	out := api.Transfer{Id: t.ID, Kind: api.TransferKind(t.Kind), ForMove: t.ForMove, State: t.State,
		OrganizationId: t.OrganizationID, Counts: t.Counts, SizeBytes: t.SizeBytes, Failure: t.Failure,
		DestinationUrl: t.DestinationURL, CompletedAt: utc(t.CompletedAt), CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC()}
	if out.Counts == nil {
		out.Counts = map[string]int64{}
	}
	out.Progress.Rows, out.Progress.Bytes = t.RowsDone, t.BytesDone
	if t.SHA256 != nil {
		s := hex.EncodeToString(t.SHA256)
		out.Sha256 = &s
	}
	return out
}

func transferLocation(id string) *string {
	loc := "/api/v1/operator/transfers/" + id
	return &loc
}

// CreateExport starts an export: the transfer and its job commit with the request's
// transaction, so a retry under the same key finds the same transfer.
func (s *Server) CreateExport(ctx context.Context, req api.CreateExportRequestObject) (api.CreateExportResponseObject, error) {
	st := pipeline.From(ctx)
	if st.Tx == nil {
		return nil, fmt.Errorf("createExport outside the mutation transaction")
	}
	forMove := req.Body != nil && req.Body.ForMove != nil && *req.Body.ForMove
	t, o, err := domain.CreateExport(ctx, st.Tx, req.OrganizationId, st.Actor.CredentialID, forMove)
	if err != nil {
		return nil, err
	}
	st.Audit.Target(o, []string{"export"})
	if _, err := s.jobs.InsertTx(ctx, st.Tx, ExportArgs{TransferID: t.ID}, nil); err != nil {
		return nil, fmt.Errorf("queue export: %w", err)
	}
	return api.CreateExport202JSONResponse{Body: transferJSON(t), Headers: api.CreateExport202ResponseHeaders{Location: transferLocation(t.ID)}}, nil
}

// ImportOrganization reads an archive from the request's body into an empty organization, in
// the request's one transaction.
func (s *Server) ImportOrganization(ctx context.Context, req api.ImportOrganizationRequestObject) (api.ImportOrganizationResponseObject, error) {
	st := pipeline.From(ctx)
	if st.Tx == nil {
		return nil, fmt.Errorf("importOrganization outside the mutation transaction")
	}
	t, o, err := domain.ImportArchive(ctx, st.Tx, req.OrganizationId, st.Actor.CredentialID, req.Body)
	if o.ID != "" {
		st.Audit.Target(o, []string{"import"})
	}
	if err != nil {
		return nil, err
	}
	return api.ImportOrganization201JSONResponse{Body: transferJSON(t), Headers: api.ImportOrganization201ResponseHeaders{Location: transferLocation(t.ID)}}, nil
}

// ListTransfers pages through transfers, newest first.
func (s *Server) ListTransfers(ctx context.Context, req api.ListTransfersRequestObject) (api.ListTransfersResponseObject, error) {
	before, err := optionalPageToken(req.Params.PageToken, "xfr")
	if err != nil {
		return nil, err
	}
	org := ""
	if req.Params.OrganizationId != nil {
		org = *req.Params.OrganizationId
	}
	size := pageSize(req.Params.PageSize)
	ts, err := domain.ListTransfers(ctx, s.q(ctx), org, before, size+1)
	if err != nil {
		return nil, err
	}
	out := api.TransferList{Items: []api.Transfer{}}
	ts, out.NextPageToken = page(ts, size, func(t domain.Transfer) string { return t.ID })
	for _, t := range ts {
		out.Items = append(out.Items, transferJSON(t))
	}
	return api.ListTransfers200JSONResponse{Body: out}, nil
}

// GetTransfer reads a transfer's status.
func (s *Server) GetTransfer(ctx context.Context, req api.GetTransferRequestObject) (api.GetTransferResponseObject, error) {
	t, err := domain.GetTransfer(ctx, s.q(ctx), req.TransferId)
	if err != nil {
		return nil, err
	}
	return api.GetTransfer200JSONResponse{Body: transferJSON(t)}, nil
}

// CancelTransfer cancels an export (already cancelled is success).
func (s *Server) CancelTransfer(ctx context.Context, req api.CancelTransferRequestObject) (api.CancelTransferResponseObject, error) {
	t, o, changed, err := domain.CancelTransfer(ctx, s.q(ctx), req.TransferId)
	if o.ID != "" {
		pipeline.From(ctx).Audit.Target(o, changed)
	}
	if err != nil {
		return nil, err
	}
	return api.CancelTransfer200JSONResponse{Body: transferJSON(t)}, nil
}

// CreateDownloadAuthorization returns a single-use download URL bound to the calling token.
// The capability is in this response only: never stored with the idempotent result (the
// operation's x-renga-secret-fields), nor in the audit event.
func (s *Server) CreateDownloadAuthorization(ctx context.Context, req api.CreateDownloadAuthorizationRequestObject) (api.CreateDownloadAuthorizationResponseObject, error) {
	st := pipeline.From(ctx)
	t, o, capability, expires, err := domain.AuthorizeDownload(ctx, s.q(ctx), req.TransferId, st.Actor.CredentialID)
	if o.ID != "" {
		st.Audit.Target(o, []string{"download_authorization"})
	}
	if err != nil {
		return nil, err
	}
	u := fmt.Sprintf("%s/api/v1/operator/transfers/%s/archive?capability=%s", s.cfg.PublicURL, url.PathEscape(t.ID), url.QueryEscape(capability))
	return api.CreateDownloadAuthorization201JSONResponse{Body: api.DownloadAuthorization{DownloadUrl: u, ExpiresAt: expires.UTC()}}, nil
}

// GetTransferArchive spends a download capability and streams the archive, one chunk in
// memory at a time.
func (s *Server) GetTransferArchive(ctx context.Context, req api.GetTransferArchiveRequestObject) (api.GetTransferArchiveResponseObject, error) {
	st := pipeline.From(ctx)
	if t, err := domain.GetTransfer(ctx, s.pool, req.TransferId); err == nil {
		if o, err := domain.GetOrganization(ctx, s.pool, t.OrganizationID); err == nil {
			st.Audit.Target(o, nil) // the download is audited (x-renga-audited-read)
		}
	}
	t, err := domain.UseDownload(ctx, s.pool, req.TransferId, req.Params.Capability, st.Actor.CredentialID)
	if err != nil {
		return nil, err
	}
	st.Audit.ChangedFields = []string{"download"}
	digest := "sha-256=:" + base64.StdEncoding.EncodeToString(t.SHA256) + ":"
	return api.GetTransferArchive200ApplicationoctetStreamResponse{
		Body:          &archiveReader{ctx: ctx, s: s, id: t.ID, remaining: *t.SizeBytes},
		ContentLength: *t.SizeBytes,
		Headers:       api.GetTransferArchive200ResponseHeaders{ReprDigest: &digest},
	}, nil
}

// archiveReader reads an archive's chunks in sequence, up to its recorded size.
type archiveReader struct {
	ctx       context.Context
	s         *Server
	id        string
	seq       int
	buf       []byte
	remaining int64
}

func (r *archiveReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.remaining <= 0 {
			return 0, io.EOF
		}
		chunk, err := domain.ArchiveChunk(r.ctx, r.s.pool, r.id, r.seq)
		if err != nil { // the transfer was cancelled meanwhile, or the database is gone
			return 0, fmt.Errorf("archive %s chunk %d: %w", r.id, r.seq, err)
		}
		r.seq++
		r.buf = chunk
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	r.remaining -= int64(n)
	return n, nil
}

// CompleteTransfer marks a succeeded export's organization moved.
func (s *Server) CompleteTransfer(ctx context.Context, req api.CompleteTransferRequestObject) (api.CompleteTransferResponseObject, error) {
	var dest *string
	if req.Body != nil {
		dest = req.Body.DestinationUrl
	}
	t, o, changed, err := domain.CompleteTransfer(ctx, s.q(ctx), req.TransferId, dest)
	if o.ID != "" {
		pipeline.From(ctx).Audit.Target(o, changed)
	}
	if err != nil {
		return nil, err
	}
	return api.CompleteTransfer200JSONResponse{Body: transferJSON(t)}, nil
}
