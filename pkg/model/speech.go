package model

import (
	"context"
	"io"
	"time"
)

// TranscribeRequest is one piece of audio to turn into text (OpenAI's
// POST /v1/audio/transcriptions).
type TranscribeRequest struct {
	// Model is the server's model id ("whisper-1").
	Model string
	// Filename is the audio's file name, with the extension that tells
	// the server its format ("voice.ogg", "clip.m4a").
	Filename string
	// Audio is the file's content.
	Audio []byte
	// Language is an ISO-639-1 hint ("de"); empty: the server detects it.
	Language string
	// Duration is how long the audio lasts, known before it is sent.
	Duration time.Duration
}

// Transcriber is a provider that hears audio.
type Transcriber interface {
	Transcribe(ctx context.Context, req TranscribeRequest) (string, error)
}

// SpeechRequest is text to speak (OpenAI's POST /v1/audio/speech).
type SpeechRequest struct {
	Model string
	Voice string
	Text  string
	// Format is the audio format asked for: "opus" is OGG/Opus, what
	// voice notes are.
	Format string
}

// Speaker is a provider that speaks text.
type Speaker interface {
	// Speak returns the audio in req.Format; the caller closes it.
	Speak(ctx context.Context, req SpeechRequest) (io.ReadCloser, error)
}
