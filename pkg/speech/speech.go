// Package speech holds what Mother knows of audio herself, without an
// encoder or a decoder (she is a static binary on a Pi): how long an
// OGG/Opus or OGG/Vorbis voice note lasts, read from its pages' granule
// positions, and how a length is shown ("0:42"). Transcription and
// speech synthesis are a speech server's (pkg/model, pkg/broker).
package speech

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNotOgg: the data is not an OGG stream Mother can time.
var ErrNotOgg = errors.New("not an OGG/Opus or OGG/Vorbis stream")

// OggDuration is how long the OGG stream in data plays: the last granule
// position of its first logical stream, over its sample rate (48 kHz for
// Opus, less its pre-skip; the identification header's rate for Vorbis).
func OggDuration(data []byte) (time.Duration, error) {
	var (
		serial  uint32
		rate    uint64
		preSkip uint64
		last    int64 = -1
		first         = true
	)
	for off := 0; off+27 <= len(data); {
		h := data[off:]
		if string(h[:4]) != "OggS" || h[4] != 0 {
			return 0, fmt.Errorf("%w: no page at byte %d", ErrNotOgg, off)
		}
		nseg := int(h[26])
		if 27+nseg > len(h) {
			break // torn last page
		}
		size := 27 + nseg
		for _, s := range h[27 : 27+nseg] {
			size += int(s)
		}
		if size > len(h) {
			break
		}
		granule := int64(binary.LittleEndian.Uint64(h[6:14]))
		ser := binary.LittleEndian.Uint32(h[14:18])
		body := h[27+nseg : size]
		if first {
			first, serial = false, ser
			switch {
			case len(body) >= 12 && string(body[:8]) == "OpusHead":
				rate, preSkip = 48000, uint64(binary.LittleEndian.Uint16(body[10:12]))
			case len(body) >= 16 && string(body[:7]) == "\x01vorbis":
				rate = uint64(binary.LittleEndian.Uint32(body[12:16]))
			default:
				return 0, ErrNotOgg
			}
		}
		if ser == serial && granule >= 0 {
			last = granule
		}
		off += size
	}
	if first || rate == 0 {
		return 0, ErrNotOgg
	}
	if last < 0 || uint64(last) < preSkip {
		return 0, fmt.Errorf("%w: no audio page", ErrNotOgg)
	}
	samples := uint64(last) - preSkip
	return time.Duration(samples * uint64(time.Second) / rate), nil
}

// Format shows d as a voice note's length: "0:42", "12:05", "1:02:03"
// (seconds rounded up, so a note of 0.3 s is "0:01").
func Format(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 0 {
		s = 0
	}
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// Ext is the file extension a speech server reads the format by, for an
// audio file of mime type mime named name: name's own if it has one, else
// the type's ("audio/ogg": ".ogg").
func Ext(name, mime string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 && i < len(name)-1 && len(name)-i <= 6 {
		return strings.ToLower(name[i:])
	}
	mime, _, _ = strings.Cut(strings.ToLower(mime), ";")
	switch strings.TrimSpace(mime) {
	case "audio/ogg", "audio/opus", "application/ogg":
		return ".ogg"
	case "audio/mpeg", "audio/mp3":
		return ".mp3"
	case "audio/mp4", "audio/m4a", "audio/x-m4a", "audio/aac":
		return ".m4a"
	case "audio/wav", "audio/x-wav", "audio/wave":
		return ".wav"
	case "audio/webm":
		return ".webm"
	case "audio/flac", "audio/x-flac":
		return ".flac"
	}
	return ".ogg"
}

// CannotHear is what the model reads of a voice message of length d that
// Mother could not transcribe, and why: "[a voice message of 0:42 that I
// could not transcribe: no speech server is configured]" (d 0: unknown).
func CannotHear(d time.Duration, why string) string {
	of := ""
	if d > 0 {
		of = " of " + Format(d)
	}
	return "[a voice message" + of + " that I could not transcribe: " + why + "]"
}

// Heard is a transcript as the model reads it: "[voice 0:42] text"
// ("[voice] text" when the length is unknown, d 0).
func Heard(d time.Duration, text string) string {
	if d <= 0 {
		return "[voice] " + text
	}
	return "[voice " + Format(d) + "] " + text
}

// OpusWaveform is a rough loudness curve of the OGG/Opus stream in data
// in n buckets of 0 to 255, for Discord's voice-message waveform: the
// size of each Opus packet (a VBR encoder spends more bytes on louder,
// busier sound), the largest in each bucket, scaled to the largest of
// all. It decodes nothing. Silence-only or unreadable streams give n
// zeros.
func OpusWaveform(data []byte, n int) []byte {
	var sizes []int
	cur, packets := 0, 0
	for off := 0; off+27 <= len(data); {
		h := data[off:]
		if string(h[:4]) != "OggS" {
			break
		}
		nseg := int(h[26])
		if 27+nseg > len(h) {
			break
		}
		for _, l := range h[27 : 27+nseg] {
			cur += int(l)
			if l < 255 {
				if packets >= 2 { // OpusHead and OpusTags are not sound
					sizes = append(sizes, cur)
				}
				packets++
				cur = 0
			}
		}
		size := 27 + nseg
		for _, l := range h[27 : 27+nseg] {
			size += int(l)
		}
		off += size
	}
	out := make([]byte, n)
	if len(sizes) == 0 || n == 0 {
		return out
	}
	peaks := make([]int, n)
	top := 0
	for i, s := range sizes {
		b := i * n / len(sizes)
		peaks[b] = max(peaks[b], s)
		top = max(top, s)
	}
	for i, p := range peaks {
		if p == 0 && i > 0 { // fewer packets than buckets: hold the last
			p = peaks[i-1]
			peaks[i] = p
		}
		out[i] = byte(p * 255 / top)
	}
	return out
}
