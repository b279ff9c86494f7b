package domain

import (
	"context"
	"time"

	"renga.dev/renga/server/db"
)

// Mail is a message waiting for (or past) delivery.
type Mail struct {
	ID             string
	OrganizationID *string
	Recipient      string
	Subject        string
	Body           *string // nil once sent: the body may hold a secret
	SentAt         *time.Time
}

// QueueMail stores a message for the mail worker. Call it in the transaction of the change
// that causes the mail, with the job that sends it.
func QueueMail(ctx context.Context, q db.DBTX, orgID *string, to, subject, body string) (string, error) {
	id := db.NewID("msg")
	_, err := q.Exec(ctx, `INSERT INTO outbound_mail (id, organization_id, recipient, subject, body) VALUES ($1, $2, $3, $4, $5)`,
		id, orgID, to, subject, body)
	return id, err
}

// GetMail reads a message; db.ErrNotFound when it went with its organization.
func GetMail(ctx context.Context, q db.DBTX, id string) (Mail, error) {
	var m Mail
	err := q.QueryRow(ctx, `SELECT id, organization_id, recipient, subject, body, sent_at FROM outbound_mail WHERE id = $1`, id).
		Scan(&m.ID, &m.OrganizationID, &m.Recipient, &m.Subject, &m.Body, &m.SentAt)
	return m, db.Translate(err)
}

// MarkMailSent records delivery and forgets the body.
func MarkMailSent(ctx context.Context, q db.DBTX, id string) error {
	_, err := q.Exec(ctx, `UPDATE outbound_mail SET sent_at = now(), body = NULL WHERE id = $1`, id)
	return err
}

// AbandonMail forgets the body of a message that will never be sent.
func AbandonMail(ctx context.Context, q db.DBTX, id string) error {
	_, err := q.Exec(ctx, `UPDATE outbound_mail SET body = NULL WHERE id = $1`, id)
	return err
}
