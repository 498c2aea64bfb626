// Package speechtest is a fake speech server at the wire: OpenAI's audio
// API as whisper.cpp's server, faster-whisper-server, vLLM and OpenAI take
// it. POST /v1/audio/transcriptions reads the multipart form strictly (the
// fields the API knows, a file whose name has an extension the servers
// read the format by, an OGG file that is one) and answers {"text": ...};
// POST /v1/audio/speech reads the JSON body and answers the audio the test
// gave it.
package speechtest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"sync"
)

// Transcription is one transcription request as the server read it.
type Transcription struct {
	Filename       string
	Audio          []byte
	Model          string
	Language       string
	ResponseFormat string
	Temperature    string
	Auth           string
}

// SpeechCall is one speech request.
type SpeechCall struct {
	Model, Voice, Input, Format string
}

// Server is the fake.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	texts    map[[32]byte]string
	status   int
	trans    []Transcription
	speech   []SpeechCall
	problems []string
	audioOut []byte
	key      string
}

// SetKey makes the server want this bearer key (empty: none).
func (s *Server) SetKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// New starts a fake speech server; its API base is URL + "/v1".
func New() *Server {
	s := &Server{texts: map[[32]byte]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/audio/transcriptions", s.transcribe)
	mux.HandleFunc("POST /v1/audio/speech", s.speak)
	s.Server = httptest.NewServer(mux)
	return s
}

// BaseURL is the API base, with its /v1.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Hears makes the server answer text for audio (the bytes a test made).
func (s *Server) Hears(audio []byte, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.texts[sha256.Sum256(audio)] = text
}

// Fail makes every request answer status with an OpenAI error body (0:
// answer again).
func (s *Server) Fail(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

// Speaks sets the audio /v1/audio/speech answers.
func (s *Server) Speaks(audio []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audioOut = audio
}

// Transcriptions are the transcription requests that were well formed.
func (s *Server) Transcriptions() []Transcription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Transcription(nil), s.trans...)
}

// SpeechCalls are the speech requests that were well formed.
func (s *Server) SpeechCalls() []SpeechCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SpeechCall(nil), s.speech...)
}

// Problems are what the server refused in requests, as sentences.
func (s *Server) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

// formats are the extensions OpenAI's API takes (whisper.cpp's server
// and faster-whisper decode the same through ffmpeg).
var formats = map[string]bool{".flac": true, ".mp3": true, ".mp4": true, ".mpeg": true, ".mpga": true, ".m4a": true, ".ogg": true, ".oga": true, ".wav": true, ".webm": true, ".opus": true}

// fields are the form fields of the API.
var fields = map[string]bool{"model": true, "language": true, "prompt": true, "response_format": true, "temperature": true, "timestamp_granularities[]": true, "stream": true}

func (s *Server) refuse(w http.ResponseWriter, status int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.problems = append(s.problems, msg)
	s.mu.Unlock()
	writeError(w, status, msg)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": nil}})
}

func (s *Server) failing(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	status, key := s.status, s.key
	s.mu.Unlock()
	if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
		writeError(w, http.StatusUnauthorized, "Incorrect API key provided")
		return true
	}
	if status == 0 {
		return false
	}
	writeError(w, status, http.StatusText(status))
	return true
}

func (s *Server) transcribe(w http.ResponseWriter, r *http.Request) {
	if s.failing(w, r) {
		return
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		s.refuse(w, 400, "Content-Type %q: want multipart/form-data", r.Header.Get("Content-Type"))
		return
	}
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		s.refuse(w, 400, "cannot read the form: %v", err)
		return
	}
	f := r.MultipartForm
	for k := range f.Value {
		if !fields[k] {
			s.refuse(w, 400, "unknown field %q", k)
			return
		}
	}
	for k := range f.File {
		if k != "file" {
			s.refuse(w, 400, "unknown file field %q", k)
			return
		}
	}
	fhs := f.File["file"]
	if len(fhs) != 1 {
		s.refuse(w, 400, "want one file field, got %d", len(fhs))
		return
	}
	fh := fhs[0]
	ext := strings.ToLower(path.Ext(fh.Filename))
	if !formats[ext] {
		s.refuse(w, 400, "Invalid file format %q. Supported formats: flac, m4a, mp3, mp4, mpeg, mpga, oga, ogg, wav, webm", fh.Filename)
		return
	}
	rd, err := fh.Open()
	if err != nil {
		s.refuse(w, 400, "cannot open the file: %v", err)
		return
	}
	audio, _ := io.ReadAll(rd)
	rd.Close()
	if (ext == ".ogg" || ext == ".oga" || ext == ".opus") && !strings.HasPrefix(string(audio), "OggS") {
		s.refuse(w, 400, "%s is not an OGG file", fh.Filename)
		return
	}
	one := func(k string) string {
		if v := f.Value[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	t := Transcription{Filename: fh.Filename, Audio: audio, Model: one("model"), Language: one("language"),
		ResponseFormat: one("response_format"), Temperature: one("temperature"), Auth: r.Header.Get("Authorization")}
	if t.Model == "" {
		s.refuse(w, 400, "model: field required")
		return
	}
	switch t.ResponseFormat {
	case "", "json", "text", "verbose_json", "srt", "vtt":
	default:
		s.refuse(w, 400, "response_format %q: want json, text, srt, verbose_json or vtt", t.ResponseFormat)
		return
	}
	if t.Temperature != "" {
		if v, err := strconv.ParseFloat(t.Temperature, 64); err != nil || v < 0 || v > 1 {
			s.refuse(w, 400, "temperature %q: want a number from 0 to 1", t.Temperature)
			return
		}
	}
	if l := t.Language; l != "" && (len(l) != 2 || strings.ToLower(l) != l) {
		s.refuse(w, 400, "language %q: want an ISO-639-1 code", l)
		return
	}
	s.mu.Lock()
	text, known := s.texts[sha256.Sum256(audio)]
	s.trans = append(s.trans, t)
	s.mu.Unlock()
	if !known {
		text = "(unknown audio)"
	}
	switch t.ResponseFormat {
	case "text":
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, text+"\n")
	default:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"text": text})
	}
}

func (s *Server) speak(w http.ResponseWriter, r *http.Request) {
	if s.failing(w, r) {
		return
	}
	var v struct {
		Model          string   `json:"model"`
		Input          string   `json:"input"`
		Voice          string   `json:"voice"`
		ResponseFormat string   `json:"response_format"`
		Speed          *float64 `json:"speed"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		s.refuse(w, 400, "cannot read the body: %v", err)
		return
	}
	if v.Model == "" || v.Input == "" || v.Voice == "" {
		s.refuse(w, 400, "model, input and voice are required")
		return
	}
	types := map[string]string{"": "audio/mpeg", "mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm"}
	ct, ok := types[v.ResponseFormat]
	if !ok {
		s.refuse(w, 400, "response_format %q: want mp3, opus, aac, flac, wav or pcm", v.ResponseFormat)
		return
	}
	s.mu.Lock()
	s.speech = append(s.speech, SpeechCall{Model: v.Model, Voice: v.Voice, Input: v.Input, Format: v.ResponseFormat})
	out := s.audioOut
	s.mu.Unlock()
	w.Header().Set("Content-Type", ct)
	w.Write(out)
}
