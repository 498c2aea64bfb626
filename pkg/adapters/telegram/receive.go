package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/go-telegram/bot"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/clock"
)

// ---- long polling ----

// apiError is a Bot API error answer.
type apiError struct {
	Code        int
	Description string
	RetryAfter  time.Duration
}

func (e *apiError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("HTTP %d: %s (retry after %v)", e.Code, e.Description, e.RetryAfter)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Code, e.Description)
}

// getUpdates fetches the updates after the stored offset, waiting up to
// timeout for one to arrive. Each update is returned raw: a malformed one
// is skipped alone.
func (a *Adapter) getUpdates(ctx context.Context, timeout time.Duration) ([]json.RawMessage, error) {
	body, _ := json.Marshal(map[string]any{
		"offset":          a.off.next(),
		"timeout":         int(timeout / time.Second),
		"allowed_updates": []string{"message", "callback_query"},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.api+"/bot"+a.cfg.BotToken.Value()+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, errors.New(a.redact(err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.opts.Client.Do(req)
	if err != nil {
		return nil, errors.New(a.redact(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read updates: %s", a.redact(err))
	}
	var r struct {
		OK          bool              `json:"ok"`
		Result      []json.RawMessage `json:"result"`
		ErrorCode   int               `json:"error_code"`
		Description string            `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("getUpdates: HTTP %d, undecodable answer: %v", resp.StatusCode, err)
	}
	if !r.OK {
		code := r.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return nil, &apiError{Code: code, Description: r.Description, RetryAfter: time.Duration(r.Parameters.RetryAfter) * time.Second}
	}
	return r.Result, nil
}

// poll long-polls until ctx ends. A failed poll marks the connection lost
// and is retried with backoff; the first batch after a loss holds what
// arrived meanwhile and is delivered late. An update Mother could not
// store (notStored: the first batch's) is asked for again once she can.
func (a *Adapter) poll(ctx context.Context, notStored error) {
	bo := feed.Backoff{Min: a.opts.BackoffMin, Max: a.opts.BackoffMax}
	retry := feed.Backoff{Min: feed.RetryMin, Max: feed.RetryMax}
	lost, refused := false, notStored != nil
	if refused {
		a.lg.Warn("Mother could not store an update; not confirming it, Telegram offers it again", "err", notStored)
		if feed.WaitRetry(ctx, a.clock, notStored, &retry) != nil {
			return
		}
	}
	for ctx.Err() == nil {
		timeout := a.opts.PollTimeout
		if lost {
			timeout = 0 // just what is pending
		}
		ups, err := a.getUpdates(ctx, timeout)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var ae *apiError
			if errors.As(err, &ae) && ae.Code == http.StatusTooManyRequests {
				a.lg.Info("rate limited by Telegram while polling; waiting", "retry_after", ae.RetryAfter)
				if clock.Sleep(ctx, a.clock, max(ae.RetryAfter, time.Second)) != nil {
					return
				}
				continue
			}
			wait := bo.Next()
			a.conn.Lost(err)
			lost = true
			if errors.As(err, &ae) && ae.Code == http.StatusConflict {
				a.lg.Error("getUpdates refused: another client polls this bot, or a webhook is set", "err", err, "retry_in", wait.Round(time.Millisecond))
			} else {
				a.lg.Warn("polling Telegram failed; retrying", "attempt", bo.Attempts(), "retry_in", wait.Round(time.Millisecond), "err", err)
			}
			if clock.Sleep(ctx, a.clock, wait) != nil {
				return
			}
			continue
		}
		late := lost || refused
		if lost {
			a.lg.Warn("connection to Telegram was lost; reconnected", "attempts", bo.Attempts())
			a.conn.Reconnected()
			bo.Reset()
			lost = false
		}
		err = a.process(ctx, ups, late)
		if err == nil {
			if refused {
				a.lg.Info("Mother takes messages again; the updates she could not store were offered again", "attempts", retry.Attempts())
			}
			refused = false
			retry.Reset()
			continue
		}
		// Mother could not store an update: its offset stays unconfirmed
		// and the updates after it untouched, so getUpdates offers them
		// again, once she can store them (the next are late: they waited).
		if !refused {
			a.lg.Warn("Mother could not store an update; not confirming it, Telegram offers it again", "err", err)
		}
		refused = true
		if feed.WaitRetry(ctx, a.clock, err, &retry) != nil {
			return
		}
	}
}

// process handles a batch of updates in order, storing the offset after
// each one. It stops at an update Mother could not store and returns her
// error: that update and those after it are not confirmed.
func (a *Adapter) process(ctx context.Context, ups []json.RawMessage, late bool) error {
	for _, raw := range ups {
		if ctx.Err() != nil {
			return nil
		}
		if err := a.handleRaw(ctx, raw, late); err != nil {
			return err
		}
	}
	return nil
}

// handleRaw handles one update unless it was handled already, and records
// its id as done, unless Mother could not store it (the error).
func (a *Adapter) handleRaw(ctx context.Context, raw json.RawMessage, late bool) error {
	var head struct {
		UpdateID int64 `json:"update_id"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.UpdateID <= 0 {
		a.lg.Warn("skipping an update without an update_id", "update", truncate(string(raw), 200))
		return nil
	}
	if head.UpdateID <= a.off.last() {
		return nil // delivered before a restart, or a webhook retry
	}
	channelID, err := a.handleUpdate(ctx, raw, late)
	if err != nil {
		return err
	}
	a.off.save(head.UpdateID, channelID)
	return nil
}

// ---- webhook ----

// startWebhook listens on webhookListen and registers webhookURL.
func (a *Adapter) startWebhook(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.WebhookListen)
	if err != nil {
		return fmt.Errorf("telegram: webhook listener: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(a.serveWebhook), ReadHeaderTimeout: 10 * time.Second}
	a.mu.Lock()
	a.srv = srv
	a.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.lg.Error("webhook listener stopped", "err", err)
			a.conn.Down(err)
		}
	}()
	_, err = a.bot.SetWebhook(ctx, &bot.SetWebhookParams{
		URL:            a.cfg.WebhookURL,
		SecretToken:    a.cfg.WebhookSecret.Value(),
		AllowedUpdates: []string{"message", "callback_query"},
	})
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("telegram: setWebhook: %s", a.redact(err))
	}
	a.conn.Connected()
	return nil
}

// WebhookSecretHeader carries the webhook's secret token.
const WebhookSecretHeader = "X-Telegram-Bot-Api-Secret-Token"

func (a *Adapter) serveWebhook(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if r.Header.Get(WebhookSecretHeader) != a.cfg.WebhookSecret.Value() {
		a.lg.Warn("refusing a webhook request without the secret token", "remote", r.RemoteAddr)
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	stopping := a.stopping
	a.mu.Unlock()
	if stopping {
		http.Error(w, "stopping", http.StatusServiceUnavailable)
		return
	}
	a.handleMu.Lock()
	err = a.handleRaw(r.Context(), raw, false)
	a.handleMu.Unlock()
	if err != nil {
		// Not stored: Telegram sends the update again later.
		a.lg.Warn("Mother could not store a webhook update; answering 503 so Telegram sends it again", "err", err)
		http.Error(w, "not stored", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}
