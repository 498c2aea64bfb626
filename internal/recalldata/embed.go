package recalldata

import (
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// Dims is the length of an Embed vector.
const Dims = 256

// Weights of a token in an Embed vector: a word the lexicon knows counts
// as its concept; a word it does not know counts weakly as itself (names,
// numbers, rare words), so exact matches still help a little, as they do
// in a real model.
const (
	conceptWeight = 1.0
	unknownWeight = 0.35
)

// Embed is a deterministic stand-in for a text embedding model: a bag of
// concepts. Each word is lower-cased and looked up (as it is, then
// stemmed) in a general lexicon of synonym groups (lexicon below: "leak",
// "drip" and "dripping" are one concept; "plumber" and "plumbing"
// another); each concept is hashed into two of Dims dimensions with a
// sign, words the lexicon does not know are hashed weakly, stop words
// count for nothing, and the sum is scaled to unit length. Texts that say
// the same thing in other words therefore come out close, as with a real
// model, and unrelated texts nearly orthogonal.
//
// The lexicon is general vocabulary: it knows no message, question or
// answer of History. A text with no word that counts gets a fixed unit
// vector of its own.
func Embed(text string) []float32 {
	v := make([]float64, Dims)
	counted := false
	for _, w := range Words(text) {
		if stopWords[w] {
			continue
		}
		if c, ok := Concept(w); ok {
			addHashed(v, "c:"+c, conceptWeight)
		} else {
			addHashed(v, "w:"+Stem(w), unknownWeight)
		}
		counted = true
	}
	out := make([]float32, Dims)
	if !counted {
		out[0] = 1
		return out
	}
	var sum float64
	for _, x := range v {
		sum += x * x
	}
	norm := math.Sqrt(sum)
	if norm == 0 {
		out[0] = 1
		return out
	}
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

// addHashed adds weight to two dimensions of v chosen by hashing key,
// each with a sign from the hash, so that two keys colliding in one
// dimension rarely collide in both.
func addHashed(v []float64, key string, weight float64) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	x := h.Sum64()
	w := weight / math.Sqrt2
	for i := 0; i < 2; i++ {
		idx := int(x % Dims)
		x /= Dims
		sign := 1.0
		if x&1 == 1 {
			sign = -1
		}
		x >>= 1
		v[idx] += sign * w
	}
}

// Words splits text into lower-cased words: runs of letters and digits,
// apostrophes dropped ("don't" is "dont").
func Words(text string) []string {
	text = strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(text, "'", ""), "’", ""))
	return strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// Concept returns the concept a word belongs to in the lexicon, trying
// the word as it is and then its stem.
func Concept(w string) (string, bool) {
	if c, ok := lexicon[w]; ok {
		return c, true
	}
	c, ok := lexicon[Stem(w)]
	return c, ok
}

// Stem strips a common English inflection: a light stemmer, enough to
// join "leaks", "leaked" and "leaking" to "leak" where the lexicon does
// not list them.
func Stem(w string) string {
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if len(w) > len(suf)+2 && strings.HasSuffix(w, suf) {
			s := strings.TrimSuffix(w, suf)
			if suf == "s" && strings.HasSuffix(s, "s") {
				return w // "glass", "class"
			}
			return s
		}
	}
	return w
}

// stopWords count for nothing in Embed: function words and the chat's
// filler, which a real model also mostly looks through.
var stopWords = set(`a an the and or but if then so of to in on at by for from with
about as into over under after before up down out off again is are was were be been being
am do does did doing have has had having i me my we us our you your he him his she her
they them their it its this that these those there here what which who whom whose when
where why how all any both each few more most other some such no nor not only own same
than too very can will just should would could shall may might must also ok okay yes yeah
hi hey please thanks thank lol oh well still even get got let lets im ive youre were dont
didnt doesnt isnt wasnt thats whats its one did again`)

// synonyms is the lexicon's source: one group a line, the group's first
// word naming its concept. They are general English synonym groups and
// inflections (the household, money, health, travel, computers, the
// calendar), written without looking at any question.
const synonyms = `
plumber plumbers plumbing
leak leaks leaking leaked leaky drip drips dripping dripped seep seeping
tap taps faucet faucets spigot
pipe pipes pipework drain drains drainage
sink sinks basin washbasin
toilet toilets loo lavatory wc
shower showers bath bathtub
electrician electricians sparky
wiring wires wire cable cables
fuse fuses breaker breakers tripped
socket sockets outlet outlets plug plugs
light lights lamp lamps bulb bulbs
boiler boilers furnace
heating heater heaters radiator radiators
thermostat thermostats temperature
hot warm warmer heat
cold chilly freezing colder
broken broke break breaks faulty bust busted dead failed failing fails fail
fix fixed fixes fixing repair repaired repairs repairing mend mended sort sorted
replace replaced replacing replacement swap swapped
backup backups backed archive archives archived snapshot snapshots copy copies
nas server servers homeserver
disk disks drive drives ssd hdd harddrive storage
cloud offsite remote online
daily nightly night nights
weekly week weeks fortnightly
monthly month months
schedule scheduled schedules scheduling timetable rota
run runs running ran
decide decided decision decisions agree agreed agreement settle settled chose choose chosen pick picked opted
change changed changing changes switch switched switching move moved revise revised instead
cancel cancelled canceled cancelling cancellation drop dropped scrap scrapped
book booked booking bookings reserve reserved reservation
appointment appointments appt slot
call called calling ring rang phoned rung
email emailed emails mail mailed message messaged text texted
car cars vehicle vehicles motor
mechanic mechanics garage garages workshop
service serviced servicing mot inspection inspected checkup
tyre tyres tire tires wheel wheels puncture
brake brakes braking
oil
insurance insurer insured insure policy policies cover coverage
renew renewal renewed renewing renews expire expires expiry expiring
premium premiums quote quotes quoted
price prices cost costs costing costed fee fees charge charged charges
cheap cheaper cheapest inexpensive affordable bargain
expensive pricey dearer costly
pay paid paying payment payments transfer transferred
bill bills invoice invoices receipt receipts
budget budgets budgeting spending spend spent allowance
money cash pounds euros dollars quid
bank banks account accounts
save saved saving savings
vet vets veterinary veterinarian
dog dogs puppy puppies pup
cat cats kitten kittens
pet pets animal animals
vaccination vaccinations vaccine vaccines vaccinated jab jabs booster boosters shot shots
worm worming flea fleas tick ticks
walk walks walked walking
food feed fed feeding kibble
dentist dentists dental teeth tooth
doctor doctors gp physician surgery clinic
medicine medicines medication prescription prescriptions pills tablets
sick ill illness unwell poorly flu cold fever
hospital hospitals
holiday holidays vacation vacations trip trips getaway break
flight flights fly flying plane airline airport
hotel hotels accommodation airbnb apartment cottage
train trains rail railway
ticket tickets
passport passports visa
beach seaside coast
camping camp tent campsite
school schools
teacher teachers tutor
homework assignment assignments
term terms semester
exam exams test tests
uniform uniforms
birthday birthdays bday
party parties celebration celebrate celebrating
cake cakes
gift gifts present presents
invite invites invited invitation invitations guest guests
groceries grocery shopping shop shops supermarket store
buy bought buying purchase purchased purchasing order ordered ordering
milk
bread
recipe recipes dish dishes
dinner dinners supper meal meals tea
lunch lunches
breakfast
cook cooked cooking bake baked baking
vegetarian veggie vegan
allergy allergies allergic
garden gardens yard backyard
lawn lawns grass
mow mower mowing mowed
hedge hedges bush bushes shrub shrubs
gardener gardeners landscaper
tree trees
fence fences fencing
wifi wireless
router routers modem hub
internet broadband connection fibre fiber isp
slow sluggish laggy
fast faster quick quicker speedy
password passwords passcode pin
login logins signin username
laptop laptops computer computers pc notebook
phone phones mobile mobiles smartphone iphone android
printer printers printing print printed
update updates updated upgrade upgraded upgrading
install installed installing setup
cleaner cleaners cleaning clean cleaned housekeeper
hoover hoovering vacuum vacuuming
laundry washing washer
dishwasher
fridge fridges freezer refrigerator
oven ovens cooker hob stove
bin bins rubbish trash garbage refuse waste
recycling recycle recycled
collection collected collect pickup
babysitter babysitters sitter childminder nanny childcare
kids kid children child
son sons boy
daughter daughters girl
grandma granny nan nana grandmother
grandpa grandad granddad grandfather
mum mom mother
dad father
visit visits visiting visited stay staying
weekend weekends saturday sunday
monday
tuesday
wednesday
thursday
friday
morning mornings am
afternoon afternoons
evening evenings pm tonight
tomorrow
yesterday
today
early earlier
late later
remind reminder reminders reminded
forget forgot forgotten
photo photos picture pictures pics image images
video videos
music song songs playlist spotify
movie movies film films cinema
novel novels reading read
football soccer
swimming swim swimmer pool
piano lessons lesson
gym fitness workout exercise
key keys spare
lock locks locked locksmith
door doors
window windows glazing
roof roofs gutter gutters
paint painted painting painter decorator decorating
carpet carpets rug rugs flooring floor floors
furniture sofa couch table chairs
mattress bed beds
kitchen kitchens
bathroom bathrooms
bedroom bedrooms
loft attic
basement cellar
shed sheds
neighbour neighbours neighbor neighbors
council
tax taxes
energy electricity gas power supplier tariff
solar panels
water
noise noisy loud
smell smells smelly
damp mould mold condensation
contract contracts
deposit deposits
landlord landlords letting
mortgage mortgages remortgage
loan loans
subscription subscriptions subscribe subscribed membership
netflix streaming
certificate certificates cert
deadline deadlines due
plan plans planned planning
meeting meetings meet met
idea ideas suggestion suggestions proposal proposed propose suggest suggested
problem problems issue issues trouble fault faults
error errors
crash crashed crashes crashing froze frozen freeze
report reports summary summaries
note notes noted
list lists
minutes
`

// lexicon maps every word of synonyms to its group's concept.
var lexicon = func() map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(synonyms, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		for _, w := range f {
			if _, dup := m[w]; !dup {
				m[w] = f[0]
			}
		}
	}
	return m
}()

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}
