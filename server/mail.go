package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"mime"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"time"

	"renga.dev/renga/server/domain"
)

// message renders m as an RFC 5322 message.
func message(from string, m domain.Mail) []byte {
	var b strings.Builder
	var id [12]byte
	_, _ = rand.Read(id[:])
	host := from[strings.LastIndex(from, "@")+1:]
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%s@%s>\r\n",
		from, m.Recipient, mime.QEncoding.Encode("utf-8", m.Subject), time.Now().UTC().Format(time.RFC1123Z), hex.EncodeToString(id[:]), host)
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	if m.Body != nil {
		b.WriteString(*m.Body)
	}
	return []byte(b.String())
}

// deliver sends m through RENGA_SMTP_URL, or, without one, writes it as an .eml file under
// the data directory. Logs name the recipient and the file, never the body (it may hold a
// secret).
func deliver(cfg Config, log *slog.Logger, m domain.Mail) error {
	msg := message(cfg.MailFrom, m)
	if cfg.SMTPURL != nil {
		var auth smtp.Auth
		if u := cfg.SMTPURL.User; u != nil {
			pw, _ := u.Password()
			auth = smtp.PlainAuth("", u.Username(), pw, cfg.SMTPURL.Hostname())
		}
		if err := smtp.SendMail(cfg.SMTPURL.Host, auth, cfg.MailFrom, []string{m.Recipient}, msg); err != nil {
			return fmt.Errorf("send mail %s: %w", m.ID, err)
		}
		log.Info("mail sent", "mail_id", m.ID, "to", m.Recipient, "smtp", cfg.SMTPURL.Host)
		return nil
	}
	dir := filepath.Join(cfg.DataDir, "mail")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, m.ID+".eml")
	if err := os.WriteFile(path, msg, 0o600); err != nil {
		return err
	}
	log.Info("mail written (no RENGA_SMTP_URL)", "mail_id", m.ID, "to", m.Recipient, "file", path)
	return nil
}
