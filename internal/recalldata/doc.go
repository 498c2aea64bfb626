// Package recalldata is a test data set for Mother's recall (search over
// a channel's history): a deterministic, generated chat history with
// questions whose answers are known (History), a deterministic stand-in
// for a text embedding model (Embed), and the measure of a search over
// them (RecallAt). Tests and benchmarks use it, and the fake model
// servers (ollamatest, openaitest) embed with Embed by default; the
// daemon does not import it.
//
// # The history
//
// History(seed) is six months (Start, Days) of a family's group chat with
// Mother: Anna and Tom, their children Lily and Sam, Grandma Rose, and
// Biscuit the dog. About 3,300 messages of five kinds: people's messages
// ("user"), Mother's answers and reminders ("mother"), chicks' results
// ("chick", User the chick's id), the daily log's line for each day and its
// notes ("daily") and lines of Mother's memory file ("memory"). IDs are
// "m-000001" onwards in time order: the store keeps each platform's own
// message ids, which these stand for.
//
// The history is made of two parts, both from templates and a seeded RNG:
//
//   - Facts (families.go). Recurring events whose instances look alike and
//     differ in a name, a day or a price: a plumber or an electrician
//     called for one problem or another, the vet, the car's garage jobs,
//     birthday presents, appointments, school dates, babysitters, things
//     lent to neighbours, orders, insurance renewals, monthly bills, chick
//     errands. Stories told once whose decisions are later revised: the
//     NAS backup's schedule and where its offsite copy goes, the summer
//     holiday, the broadband switch, the car, the heating, screen time.
//     Memory-file facts, household decisions, questions put to Mother and
//     her answers, notes in the daily log. Each fact comes with the
//     messages around it (the request before it, the acknowledgement
//     after), which share its words but do not state it.
//   - Filler (filler.go). Everyday threads that answer nothing but share
//     words with what does: a tap dripping, the boiler clunking, a bill
//     due, the car booked in, reminders, the weather, lifts, the shopping
//     list, chick errands, memory lines no one asks about.
//
// # The questions
//
// Every fact message asks one question of it (some two), about 220 in
// all, each answered by exactly that message: the fact's key (the name,
// time or amount it states) is in no other message, which the package's
// test checks. A question is worded in one of three ways: in the answer's
// own words (three in four); or in other words, either throughout ("who
// did we get in to fix the dripping kitchen faucet?" for "I rang
// Kowalski Plumbing ... the leaking tap in the kitchen") or in its framing
// only, keeping the answer's words for the thing asked about, as people
// asking half remember. The shares are paraphraseShare and slotShare in
// history.go.
//
// With these shares a plain lexical search (BM25 over stemmed words, in
// the test) finds about three answers in four within its first five
// results, and a cosine ranking of Embed vectors, which knows synonyms,
// finds more; TestRecallDataBaselines logs both figures for seed 46.
//
// # The embedding
//
// Embed is a bag of concepts: a general lexicon of English synonym groups
// and inflections (embed.go's synonyms: "leak", "drip" and "dripping" are
// one concept, "vet" and "veterinary" another) maps words to concepts,
// each hashed into a few of 256 signed dimensions; words it does not know
// (names, numbers) count as themselves, less; every text also gets a
// component of its own, so a one-word message is not as close to a
// question as a message that answers it. The lexicon was written as
// general vocabulary for the household, money, health, travel and
// computers, without reference to which message answers which question.
package recalldata
